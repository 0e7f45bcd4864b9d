"""The chat layer: talking to a language model (or an offline stand-in) about retrieved memories."""
