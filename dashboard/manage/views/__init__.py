"""Views of the manage pages: ``fleet`` (overview, start/pause), ``apps`` (application form, manifest download,
delete), ``resources`` (catalogs, regions, deployments), ``manifests`` (upload, export)."""
