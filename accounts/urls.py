from django.urls import path

from accounts import views

urlpatterns = [
    path("authenticate/", views.Start.as_view(), name="oidc_authentication_init"),
    path("callback/", views.Callback.as_view(), name="oidc_authentication_callback"),
]
