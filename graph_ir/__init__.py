"""GE graph IR adapter for tf_plugin's operators. Not built yet: see the open GE graph IR issue."""
