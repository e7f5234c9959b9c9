package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/provider/peers"
)

func TestNewRefusesABadGatewayAPIAddress(t *testing.T) {
	_, err := New(Config{RESTConfig: &rest.Config{Host: "https://127.0.0.1:6443"}, Gateway: &peers.Config{APIAddress: "api.example.org"}})
	require.ErrorContains(t, err, `gateway API address "api.example.org": want an IP or IP:port`, "refused before anything starts")
}
