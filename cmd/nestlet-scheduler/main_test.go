package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/features"
)

// The gate stays off once kube-scheduler has applied its flags and
// emulation version (no --feature-gates given).
func TestNominatedNodeNameForExpectationOff(t *testing.T) {
	require.NoError(t, defaultGates())
	opts := options.NewOptions()
	require.NoError(t, opts.ComponentGlobalsRegistry.Set())
	require.False(t, utilfeature.DefaultFeatureGate.Enabled(features.NominatedNodeNameForExpectation))
}
