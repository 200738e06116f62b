package edge

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"time"

	"rental/infra/orderstore"
)

// listCursor is the opaque cursor of a list served newest first by (created_at, id): a
// version prefix naming the list, then the position of the previous page's last row,
// created_at in µs since the epoch and its id. A cursor of another list, or one edited by
// the client, is refused with 2001 on field cursor.
type listCursor struct {
	prefix string         // versions the format and names the list ("o1:" orders)
	id     *regexp.Regexp // the ids the list holds
}

func (c listCursor) encode(p orderstore.Position) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.prefix + strconv.FormatInt(p.CreatedAt.UnixMicro(), 10) + ":" + p.ID))
}

func (c listCursor) decode(s string) (orderstore.Position, error) {
	bad := Invalid("cursor", "format", "cursor is not one this endpoint issued; pass next_cursor unchanged")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return orderstore.Position{}, bad
	}
	rest, ok := strings.CutPrefix(string(raw), c.prefix)
	if !ok {
		return orderstore.Position{}, bad
	}
	micros, id, ok := strings.Cut(rest, ":")
	us, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || !c.id.MatchString(id) {
		return orderstore.Position{}, bad
	}
	return orderstore.Position{CreatedAt: time.UnixMicro(us).UTC(), ID: id}, nil
}
