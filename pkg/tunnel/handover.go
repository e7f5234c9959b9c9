package tunnel

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
)

// HandoverHeader carries, on a tunnel opened with a renewed certificate
// while the tunnel of the previous one is up, the previous key's signature
// over the renewed certificate: the proxy admits such a successor beside
// the live tunnel (it refuses any other certificate of the node's name
// while the live one is valid), sends new connections through it, and the
// previous tunnel is closed once its streams ended. Without it a renewal
// would cut the streams in flight (logs -f, exec, attach).
const HandoverHeader = "X-Nestlet-Tunnel-Handover"

// handoverDigest is what a handover signs: the renewed certificate, in a
// context of its own (the signature means nothing elsewhere).
func handoverDigest(next []byte) []byte {
	h := sha256.New()
	h.Write([]byte("nestlet tunnel handover\x00"))
	h.Write(next)
	return h.Sum(nil)
}

// SignHandover signs the renewed certificate next (DER) with prev, the
// key of the certificate whose tunnel is up, for HandoverHeader.
func SignHandover(prev crypto.Signer, next []byte) (string, error) {
	var sig []byte
	var err error
	digest := handoverDigest(next)
	if _, ok := prev.Public().(ed25519.PublicKey); ok {
		sig, err = prev.Sign(rand.Reader, digest, crypto.Hash(0))
	} else {
		sig, err = prev.Sign(rand.Reader, digest, crypto.SHA256)
	}
	if err != nil {
		return "", fmt.Errorf("signing the tunnel handover: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyHandover checks proof (HandoverHeader) against prev, the
// certificate of the live tunnel, for the renewed certificate next (DER).
func VerifyHandover(prev *x509.Certificate, next []byte, proof string) error {
	sig, err := base64.StdEncoding.DecodeString(proof)
	if err != nil {
		return fmt.Errorf("the tunnel handover is not base64: %w", err)
	}
	digest := handoverDigest(next)
	ok := false
	switch pub := prev.PublicKey.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(pub, digest, sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest, sig) == nil
	case ed25519.PublicKey:
		ok = ed25519.Verify(pub, digest, sig)
	default:
		return fmt.Errorf("the live tunnel's certificate has a key of type %T, which cannot sign a handover", prev.PublicKey)
	}
	if !ok {
		return errors.New("the tunnel handover is not signed by the live tunnel's key")
	}
	return nil
}
