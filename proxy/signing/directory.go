package signing

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// DirectoryPath is where a key directory is published on the origin its
// Signature-Agent URL names.
const DirectoryPath = "/.well-known/http-message-signatures-directory"

// DirectoryMediaType is the media type of a key directory.
const DirectoryMediaType = "application/http-message-signatures-directory+json"

// DirectoryTTL is how long a directory answer's signatures are valid;
// DirectoryMaxAge how long the answer may be cached, shorter, so that a
// key added shows within the hour.
const (
	DirectoryTTL    = 24 * time.Hour
	DirectoryMaxAge = time.Hour
)

// directoryIDs are the components a directory answer's signatures cover:
// the authority the directory was asked of, so that an answer cannot be
// served as another host's, and the body's digest (RFC 9530).
var directoryIDs = [...]string{`"@authority";req`, `"content-digest"`}

// Directory is the answer to a request for a key directory: the keys as
// a JWK set, and one signature by each of them, proving that whoever
// serves it holds every key it lists.
type Directory struct {
	Body []byte
	// ContentDigest, SignatureInput and Signature are the values of those
	// fields.
	ContentDigest, SignatureInput, Signature string
}

// NewDirectory builds the directory of keys asked of authority (the Host
// of the request, lower-case, without a default port) at now. Keys listed
// twice are listed once; expired keys are left out, since they sign
// nothing any more; keys not valid yet are listed, so that sites know
// them before they sign.
func NewDirectory(keys []*Key, authority string, now time.Time) Directory {
	type set struct {
		Keys []JWK `json:"keys"`
	}
	listed := set{Keys: []JWK{}}
	var signers []*Key
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k.id] || (!k.NotAfter.IsZero() && !now.Before(k.NotAfter)) {
			continue
		}
		seen[k.id] = true
		listed.Keys = append(listed.Keys, k.PublicJWK())
		signers = append(signers, k)
	}
	body, _ := json.Marshal(listed) // strings and numbers: cannot fail
	sum := sha256.Sum256(body)
	d := Directory{Body: body, ContentDigest: "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"}
	var input, signature strings.Builder
	created := now.Add(-clockAllowance).Unix()
	for i, k := range signers {
		base, params := Base([]Component{{directoryIDs[0], authority}, {directoryIDs[1], d.ContentDigest}}, []Param{
			{"created", strconv.FormatInt(created, 10)},
			{"expires", strconv.FormatInt(created+int64(DirectoryTTL/time.Second), 10)},
			{"keyid", `"` + k.id + `"`},
			{"alg", `"ed25519"`},
			{"nonce", `"` + string(appendNonce(nil)) + `"`},
			{"tag", `"` + TagDirectory + `"`},
		})
		if i > 0 {
			input.WriteString(", ")
			signature.WriteString(", ")
		}
		label := "sig" + strconv.Itoa(i+1)
		input.WriteString(label + "=" + string(params))
		signature.WriteString(label + "=:" + base64.StdEncoding.EncodeToString(SignBase(k, base)) + ":")
	}
	d.SignatureInput, d.Signature = input.String(), signature.String()
	return d
}
