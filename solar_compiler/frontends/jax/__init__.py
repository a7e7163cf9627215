"""The JAX / Flax NNX frontend: `jax.make_jaxpr` capture on abstract values, jaxpr primitives to loop
IR through the shared builder, validation against the JAX function's own outputs (docs/jax-frontend.md)."""
