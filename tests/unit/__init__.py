"""The unit tier (a package, so its modules may share a basename with the
integration tests beside it)."""
