"""Decision-making methods: assortment optimization, boosting, causal discovery."""
