"""The channels, siblings over the application service (oomdoctor.service): the REST API, the
web page, Slack and the CLI. A channel turns its own input into service calls and renders the
reply; no channel imports another."""
