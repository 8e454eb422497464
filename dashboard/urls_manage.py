"""Pages to manage resources: fleet overview (``/``), application forms, catalogs, regions, deployments, manifests.

Every page needs a login; applications and deployments of other users are 404.
"""

from django.urls import path

from .views import manage_apps, manage_fleet, manage_manifests, manage_resources

urlpatterns = [
    path("", manage_fleet.fleet, name="fleet"),
    path("applications/new/", manage_apps.app_create, name="app-create"),
    path("applications/<str:name>/edit/", manage_apps.app_edit, name="app-edit"),
    path("applications/<str:name>/delete/", manage_apps.app_delete, name="app-delete"),
    path("applications/<str:name>/state/", manage_fleet.set_state, name="app-state"),
    path("applications/<str:name>/manifest.yaml", manage_apps.app_manifest, name="app-manifest"),
    path("manifests/", manage_manifests.manifest_page, name="manifests"),
    path("manifests/export/", manage_manifests.manifest_export, name="manifest-export"),
]

for slug in ("catalog", "region", "deployment"):
    urlpatterns += [
        path(f"{slug}s/", manage_resources.resource_list, {"slug": slug}, name=f"{slug}s"),
        path(f"{slug}s/new/", manage_resources.resource_form, {"slug": slug}, name=f"{slug}-create"),
        path(
            f"{slug}s/<str:name>/edit/", manage_resources.resource_form, {"slug": slug}, name=f"{slug}-edit"
        ),
        path(
            f"{slug}s/<str:name>/delete/",
            manage_resources.resource_delete,
            {"slug": slug},
            name=f"{slug}-delete",
        ),
    ]
