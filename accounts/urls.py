from django.urls import path

from accounts import views

urlpatterns = [
    path("login/", views.Login.as_view(), name="login"),
    path("oidc/authenticate/", views.Start.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", views.Callback.as_view(), name="oidc_authentication_callback"),
]
