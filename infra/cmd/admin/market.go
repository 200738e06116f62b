package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"rental/infra/config"
	"rental/infra/marketstore"
	"rental/infra/pg"
	"rental/schemas/market"
)

const marketUsage = `admin market-provider -list
admin market-provider -slug S [-name N] [-kinds api,bot,pool,market,web] [-link name=url ...] [-enabled=true|false] -reason R
admin market-provider -slug S -delete -reason R
links: site, telegram, twitter, github, docs, referral, logo (name= clears one)`

// linkFlags collects repeated -link name=url flags.
type linkFlags []string

func (l *linkFlags) String() string     { return strings.Join(*l, ",") }
func (l *linkFlags) Set(v string) error { *l = append(*l, v); return nil }

// marketProvider edits the operator data of the market board (GET /v1/market): a
// provider's name, kinds, links and whether it is listed. Flags not given keep the stored
// value; a new slug starts from name = slug, no kinds, no links, enabled. The actor and
// reason are recorded in the row's updated_by ("support:<actor>: <reason>").
func marketProvider(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("market-provider", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprintln(out, marketUsage) }
	list := fs.Bool("list", false, "list the providers")
	slug := fs.String("slug", "", "provider slug")
	name := fs.String("name", "", "display name")
	kinds := fs.String("kinds", "", "comma-separated kinds (api, bot, pool, market, web); \"none\" clears")
	enabled := fs.String("enabled", "", "true lists the provider on the board, false hides it")
	del := fs.Bool("delete", false, "delete the provider's metadata")
	reason := fs.String("reason", "", "why")
	var links linkFlags
	fs.Var(&links, "link", "name=url, repeatable")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	cfg, err := config.Load()
	if err != nil {
		return 1, err
	}
	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return 1, err
	}
	defer pool.Close()
	store := marketstore.New(pool, cfg.Network)

	if *list {
		ps, err := store.Providers(ctx)
		if err != nil {
			return 1, err
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "SLUG\tNAME\tKINDS\tENABLED\tSITE")
		for _, p := range ps {
			ks := make([]string, 0, len(p.Kinds))
			for _, k := range p.Kinds {
				ks = append(ks, string(k))
			}
			site := "-"
			if p.Links.Site != nil {
				site = *p.Links.Site
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", p.Slug, p.Name, strings.Join(ks, ","), p.Enabled, site)
		}
		return 0, w.Flush()
	}
	if *slug == "" {
		return 2, errors.New("market-provider: -slug is required\n" + marketUsage)
	}
	if *reason == "" {
		return 2, errors.New("market-provider: -reason is required")
	}
	who, err := operator()
	if err != nil {
		return 2, err
	}
	by := who + ": " + *reason
	if *del {
		if err := store.DeleteProvider(ctx, *slug); err != nil {
			return 1, err
		}
		fmt.Fprintf(out, "provider %s deleted\n", *slug)
		return 0, nil
	}
	p, err := store.Provider(ctx, *slug)
	switch {
	case errors.Is(err, marketstore.ErrNotFound):
		p = market.Provider{Slug: *slug, Name: *slug, Enabled: true}
	case err != nil:
		return 1, err
	}
	if *name != "" {
		p.Name = *name
	}
	if *kinds != "" {
		p.Kinds = nil
		if *kinds != "none" {
			for _, k := range strings.Split(*kinds, ",") {
				kind, err := market.ParseKind(strings.TrimSpace(k))
				if err != nil {
					return 2, err
				}
				p.Kinds = append(p.Kinds, kind)
			}
		}
	}
	for _, l := range links {
		n, v, ok := strings.Cut(l, "=")
		if !ok {
			return 2, fmt.Errorf("market-provider: -link %q: want name=url", l)
		}
		if err := p.Links.Set(n, v); err != nil {
			return 2, err
		}
	}
	switch *enabled {
	case "":
	case "true", "false":
		p.Enabled = *enabled == "true"
	default:
		return 2, errors.New("market-provider: -enabled is true or false")
	}
	if err := store.PutProvider(ctx, p, by); err != nil {
		return 1, err
	}
	fmt.Fprintf(out, "provider %s saved\n", p.Slug)
	return 0, nil
}
