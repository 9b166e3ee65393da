"""braid's Tor controller: tor with the braid pluggable transport, client or bridge."""
