"""The venue's API, sans-I/O: records, codec, errors, signing, request building."""
