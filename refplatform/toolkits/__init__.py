"""The toolkits refplatform serves, one per toolkit of the peer: catalog, knowledge, memory,
search and SQL (with the SQL engine's parts and its worker processes).
"""
