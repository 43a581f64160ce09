"""Graph and hypergraph learning."""
