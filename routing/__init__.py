"""Pure routing layer: address format v2, exchange types and the per-vhost
routing table. No I/O and no asyncio here: the broker owns both."""
