"""Helpers for tests/test_browser.py: a throwaway JupyterLab server and notebook editing."""
