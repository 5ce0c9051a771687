#!/bin/sh
# systemd-resolved: send the zones netspec serves (and only those) to its DNS
# address on the link netspec0 (netspec watch --dns-link netspec0 makes it)
# — written by netspec render. resolved forgets these settings when the link
# goes away: run it again after the link is made (deploy/README.md).
set -e
resolvectl dns netspec0 169.254.20.10
resolvectl domain netspec0 '~0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa' '~0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa' '~10.in-addr.arpa' '~cluster.local'
resolvectl default-route netspec0 false
