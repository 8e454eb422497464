"""Accounts from the web: ``/accounts/`` log in (throttled), log out, change one's password.

Layout: ``urls.py`` (included by ``autoscaler.urls`` under ``accounts/``), ``views.py`` (the login page),
``forms.py`` (the throttled login forms, the admin's included), ``throttle.py`` (the failed-login count).
"""
