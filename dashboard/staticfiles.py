"""Static files storage of production runs: WhiteNoise's compressed manifest storage (``collectstatic`` writes
content-hashed copies, e.g. ``plotly-cartesian.min.<hash>.js``, with gzip (and brotli, when the ``brotli``
module is installed) siblings; WhiteNoise serves them compressed with a ten-year ``max-age`` and ``immutable``),
falling back to the plain names when there is no manifest entry.

The fallback keeps runs without ``collectstatic`` working (tests, the embedded demo, ``runserver`` with
``DJANGO_DEBUG`` off): Django's manifest storage raises ``ValueError`` on a missing entry and the page would fail
to render; here the template gets the plain URL, which WhiteNoise serves from the apps' directories
(``WHITENOISE_USE_FINDERS``) with its short default max-age (60 s), uncompressed. With ``DEBUG`` on, pages always
link the plain names (a developer's edit shows without ``collectstatic``), while ``collectstatic`` still writes
the hashed, compressed copies and the manifest (the image collects with ``DEBUG`` on).
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CompressedManifestOrPlainStorage(CompressedManifestStaticFilesStorage):
    """Hashed, compressed names after ``collectstatic``; the plain name for a file the manifest lacks."""

    def stored_name(self, name: str) -> str:
        from django.conf import settings

        if settings.DEBUG:
            return name
        try:
            return super().stored_name(name)
        except ValueError:  # no manifest yet (collectstatic not run) or a file added since
            return name
