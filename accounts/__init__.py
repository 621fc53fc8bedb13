"""Single sign-on by OpenID Connect: who an identity provider's user is in Treue, and the roles
its group claims give them (docs/configuration.md, "Single sign-on")."""
