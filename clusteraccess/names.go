package clusteraccess

import (
	"strconv"
	"strings"
	"unicode"
)

// NoClusterNamed is the reason given to a team that named a cluster it has not
// registered. The name is the caller's raw input, so it is quoted in ASCII: "prоd"
// with a Cyrillic о, pasted from elsewhere, would read as the "prod" the team has
// and the answer as a contradiction, and a control character (a right-to-left
// override) would rearrange or hide the text around it. A name holding characters
// other than ASCII is said to, since no registered name does.
func NoClusterNamed(name string) string {
	quoted := strconv.QuoteToASCII(name)
	if strings.ContainsFunc(name, func(r rune) bool { return r > unicode.MaxASCII }) {
		return "your team has no cluster named " + quoted + ": a cluster name holds only lower-case ASCII letters, digits and '-', " +
			"and this one holds other characters (letters of another script look like Latin ones); type the name again"
	}
	return "your team has no cluster named " + quoted + "; register it with POST /api/v1/clusters"
}
