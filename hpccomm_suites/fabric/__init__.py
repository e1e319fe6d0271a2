"""Fabric sanity before any stack runs, in the spirit of ibv_devinfo / ibstat checks: what the
named fabric must offer, each test bound to the fabric kinds it checks."""
