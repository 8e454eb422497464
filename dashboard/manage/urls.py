"""Pages to manage resources: fleet overview (``/``), application forms, catalogs, regions, deployments, manifests.

Every page needs a login; applications and deployments of other users are 404.
"""

from django.urls import path

from .views import apps, fleet, manifests, resources

urlpatterns = [
    path("", fleet.fleet, name="fleet"),
    path("applications/new/", apps.app_create, name="app-create"),
    path("applications/<str:name>/edit/", apps.app_edit, name="app-edit"),
    path("applications/<str:name>/delete/", apps.app_delete, name="app-delete"),
    path("applications/<str:name>/state/", fleet.set_state, name="app-state"),
    path("applications/<str:name>/manifest.yaml", apps.app_manifest, name="app-manifest"),
    path("manifests/", manifests.manifest_page, name="manifests"),
    path("manifests/export/", manifests.manifest_export, name="manifest-export"),
]

for slug in ("catalog", "region", "deployment"):
    urlpatterns += [
        path(f"{slug}s/", resources.resource_list, {"slug": slug}, name=f"{slug}s"),
        path(f"{slug}s/new/", resources.resource_form, {"slug": slug}, name=f"{slug}-create"),
        path(f"{slug}s/<str:name>/edit/", resources.resource_form, {"slug": slug}, name=f"{slug}-edit"),
        path(
            f"{slug}s/<str:name>/delete/",
            resources.resource_delete,
            {"slug": slug},
            name=f"{slug}-delete",
        ),
    ]
