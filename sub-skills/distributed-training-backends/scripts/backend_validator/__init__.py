"""Static validator for Accelerate configs and DeepSpeed JSON (standard library + PyYAML)."""
