// Package deploy holds no code. Its directory holds what a node needs beside
// the binary (the systemd unit, the Grafana dashboard, the Prometheus
// alerting rules; see README.md), and its tests check the Debian package
// scripts/build-deb makes of them: its contents, and an install into a
// throwaway root that leaves the host's dpkg database alone.
package deploy
