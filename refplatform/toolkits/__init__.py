"""The toolkits refplatform serves, one module per toolkit of the peer (SQL, ...)."""
