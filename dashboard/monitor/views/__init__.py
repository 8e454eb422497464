"""Views of the monitoring pages: ``app_dashboard`` (page and data.json), ``decisions`` (explorer, detail),
``agents`` (inspector), ``whatif`` (form, run status); ``common`` holds their shared helpers."""
