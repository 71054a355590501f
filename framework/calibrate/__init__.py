"""``perpframe calibrate``: latency and fill models fitted to the user's own orders and matches."""
