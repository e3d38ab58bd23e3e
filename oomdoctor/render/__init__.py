"""Renderers turn a reply dict into what a channel shows."""
