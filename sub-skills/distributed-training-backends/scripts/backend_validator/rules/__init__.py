"""Rule modules. Importing this package registers every rule in core.REGISTRY."""
