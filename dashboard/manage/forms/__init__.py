"""Forms of the manage pages: ``common`` (shared fields and the error router), ``application`` (the application
form), ``resources`` (catalogs, regions, deployments), ``manifests`` (the upload form)."""
