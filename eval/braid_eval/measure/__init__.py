"""Measured runs on the testbed: a checksummed transfer, braid-proxy's pair,
page loads through it, an idle connection's join."""
