"""An image's CUDA and requirements, from its config or, as a fallback, its tag."""
