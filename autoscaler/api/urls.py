"""URLs of REST API v1, its OpenAPI schema and documentation pages."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from . import views
from .throttling import ThrottledObtainAuthToken

router = DefaultRouter()
# no ".json" suffix routes: the API speaks JSON only, and a suffix route reached retrieve() with an unexpected
# "format" argument (a 500)
router.include_format_suffixes = False
router.register("catalogs", views.NodeTypeCatalogViewSet, basename="catalog")
router.register("regions", views.RegionViewSet, basename="region")
router.register("applications", views.ApplicationViewSet, basename="application")
router.register("deployments", views.DeploymentViewSet, basename="deployment")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("token/", ThrottledObtainAuthToken.as_view(), name="token"),
    path("apply/", views.ApplyView.as_view(), name="apply"),
    path("", include(router.urls)),
]
