"""``/accounts/``: log in (throttled, ``dashboard.accounts.views``), log out, change one's password.

Django's password-reset pages are left out on purpose: they mail a reset link, and the control plane has no mail
set up (a reset request would fail on the SMTP connection, or, with a console mail backend, write a token that
opens the account into the log). Staff set passwords (``manage.py changepassword``, the admin).
"""

from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard.accounts.views import ThrottledLoginView

urlpatterns = [
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
]
