"""Placeholder: pages are added here."""

urlpatterns: list = []
