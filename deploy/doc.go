// Package deploy holds no code. Its directory holds what a node needs beside
// the binary (the systemd unit, the Grafana dashboard, the Prometheus
// alerting rules), and ci/ the pull-request CI job of a repository of specs;
// see README.md. Its tests check the Debian package scripts/build-deb makes
// of them (its contents, and an install into a throwaway root that leaves
// the host's dpkg database alone) and run ci/netspec-pr.sh on git
// repositories of specs.
package deploy
