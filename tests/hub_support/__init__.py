"""Helpers for tests/test_hub.py: the course hub (deploy/jupyterhub/hub.py) as a child process, run
as root directly or through passwordless sudo, and commands run as the hub's users."""
