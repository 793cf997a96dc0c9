package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	// HeaderSignature is "v1=" and the hex HMAC-SHA256, keyed with the endpoint's
	// secret, of the timestamp, a dot and the raw body.
	HeaderSignature = "X-Kukie-Signature"
	// HeaderTimestamp is the Unix time (seconds) the delivery was signed at. It is
	// signed with the body, so a receiver that refuses old timestamps cannot be
	// replayed an old delivery.
	HeaderTimestamp = "X-Kukie-Timestamp"
	// HeaderEvent is plan.transition or connection.changed.
	HeaderEvent = "X-Kukie-Event"
	// HeaderDelivery is the delivery's id, the same on every retry of it, so a
	// receiver can drop a repeat.
	HeaderDelivery = "X-Kukie-Delivery"
)

// DefaultTolerance is how old a signed timestamp Verify accepts.
const DefaultTolerance = 5 * time.Minute

// Sign returns the signature header of body signed at timestamp.
func Sign(secret []byte, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a delivery as a receiver should: the signature over timestamp and
// body, compared in constant time, and the timestamp within tolerance of now.
func Verify(secret []byte, timestampHeader, signatureHeader string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestampHeader, 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s %q: %w", HeaderTimestamp, timestampHeader, err)
	}
	if !strings.HasPrefix(signatureHeader, "v1=") {
		return fmt.Errorf("bad %s: want v1=<hex>", HeaderSignature)
	}
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signatureHeader)) {
		return errors.New("signature does not match")
	}
	if age := now.Sub(time.Unix(ts, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("timestamp is %s away from now, more than %s: a replay or a wrong clock", age.Round(time.Second), tolerance)
	}
	return nil
}
