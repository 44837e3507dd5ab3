// Package deploy holds what running boxbroker as a service takes: the
// systemd unit (boxbroker.service) and its environment file
// (boxbroker.env). Its tests check them, and the repository's Dockerfile,
// with the tools the machine has: systemd-analyze verify for the unit, a
// container engine for the image, each skipped, saying so, where missing.
package deploy
