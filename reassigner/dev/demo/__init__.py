"""The demo: the whole product on a real local cluster, as a story a new user can follow."""
