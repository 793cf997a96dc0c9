package render

import (
	"fmt"
	"regexp"
	"strings"
)

// imageRef is a container image reference split the way kustomize splits it:
// [[host[:port]/]component/]component[:tag][@digest].
type imageRef struct {
	name, tag, digest string
}

func parseImageRef(s string) imageRef {
	search, offset := s, 0
	if i := strings.Index(s, "/"); i > 0 {
		search, offset = s[i:], i
	}
	at := strings.Index(search, "@")
	colon := strings.Index(search, ":")
	switch {
	case at < 0 && colon < 0:
		return imageRef{name: s}
	case at >= 0 && (colon < 0 || at < colon):
		return imageRef{name: s[:offset+at], digest: s[offset+at+1:]}
	case at >= 0:
		return imageRef{name: s[:offset+colon], tag: s[offset+colon+1 : offset+at], digest: s[offset+at+1:]}
	default:
		return imageRef{name: s[:offset+colon], tag: s[offset+colon+1:]}
	}
}

func (r imageRef) String() string {
	s := r.name
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// apply returns the reference with the change's tag or digest: a tag replaces tag
// and digest, a digest replaces both too, as kustomize's images transformer does.
func (c *Image) apply(r imageRef) imageRef {
	if c.Digest != "" {
		return imageRef{name: r.name, digest: c.Digest}
	}
	return imageRef{name: r.name, tag: c.Tag}
}

var (
	tagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestPattern = regexp.MustCompile(`^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$`)
)

func (c *Image) validate() error {
	if c.Container == "" {
		return fmt.Errorf("image change needs a container name")
	}
	if err := checkContainerName(c.Container); err != nil {
		return err
	}
	switch {
	case c.Tag != "" && c.Digest != "":
		return fmt.Errorf("image change sets a tag or a digest, not both")
	case c.Tag != "":
		if !tagPattern.MatchString(c.Tag) {
			return fmt.Errorf("image tag %q is not a valid tag", c.Tag)
		}
	case c.Digest != "":
		if !digestPattern.MatchString(c.Digest) {
			return fmt.Errorf("image digest %q is not a valid digest (algorithm:hex)", c.Digest)
		}
	default:
		return fmt.Errorf("image change needs a tag or a digest")
	}
	return nil
}
