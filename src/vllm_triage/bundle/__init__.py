"""The bundle format: its layout, manifest and facts models, the safe .tar.gz, and reading one."""
