// Package mcpserver is the MCP (Model Context Protocol) server for AI agents: tools that read
// prices, the market board, estimates, quotes, an address's resources, the balance and
// orders, and that place and reclaim orders, each one call of rental-api-v1 made through
// the Go client (infra/client: signed requests, the spec's retry policy, typed errors) with
// the API key the server was started with. Built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk); the binary is infra/cmd/mcp, docs/mcp.md says how
// an agent is configured to use it.
//
// Each tool's input is a JSON Schema the SDK derives from its Go type (and checks every call
// against); each tool's output schema is the OpenAPI document's schema of the API's answer
// (schemas/openapi), so a result is checked against the same schema the edge's answers are.
// An API error is a tool error whose text is the API's error envelope (code, slug,
// retryable, details, request_id), for the agent to branch on as docs/integrating.md says.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"rental/infra/client"
	"rental/schemas/apierr"
	"rental/schemas/scopes"
)

// Version is the server's implementation version reported to clients.
const Version = "1.0.0"

// Options configure New.
type Options struct {
	// Scopes are the API key's scopes. A tool whose endpoint needs a scope outside them is
	// not offered (the agent never sees a tool that can only answer 1005). Nil offers every
	// tool and leaves the refusal to the API.
	Scopes []string
}

// tool is one MCP tool: its name, the scope its endpoint needs ("" for public endpoints),
// and a function registering it on a server.
type tool struct {
	name  string
	scope string
	add   func(s *mcp.Server, c *client.Client, out apiSchemas) error
}

// New returns the MCP server offering the tools the key's scopes allow, calling the API
// through c.
func New(c *client.Client, opts Options) (*mcp.Server, error) {
	schemas, err := loadAPISchemas()
	if err != nil {
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "rental", Title: "TRON energy and bandwidth rental", Version: Version}, &mcp.ServerOptions{
		Instructions: instructions,
	})
	for _, t := range tools {
		if t.scope != "" && opts.Scopes != nil && !slices.Contains(opts.Scopes, t.scope) {
			continue
		}
		if err := t.add(s, c, schemas); err != nil {
			return nil, fmt.Errorf("mcpserver: tool %s: %w", t.name, err)
		}
	}
	return s, nil
}

// ToolNames lists every tool New can offer, in order, with the scope each needs ("" public).
func ToolNames() [][2]string {
	out := make([][2]string, len(tools))
	for i, t := range tools {
		out[i] = [2]string{t.name, t.scope}
	}
	return out
}

const instructions = `Rents TRON energy and bandwidth to any address. Amounts are in SUN (1 TRX = 1,000,000 SUN).
Before place_order: call estimate_order (or quote_order for a binding price), tell the user the total_amount_sun, and pass the total the user agreed to as max_price_sun; the order is refused with nothing charged (3006) if the live total is higher.
A receiver that was never activated needs activate: true (adds the activation fee shown by estimate_order) or the order answers 3004.
Repeating place_order with the same client_order_id never orders twice: it returns the first order.
Errors carry the API's code and slug; retryable: true means the identical call may succeed later (4001 after a deposit, 3004 after activation), not that it should be repeated at once.`

// apiCall is one request of a tool: method, target (path with /v1 and the encoded query),
// and the JSON body (nil for none).
type apiCall struct {
	method, target string
	body           any
	opts           []client.CallOption
	// pick, when set, turns the answer into the tool's result (a list's one item).
	pick func(map[string]any) (map[string]any, error)
}

// The tools' MCP annotations: reads; writes that add (a quote; an order, place_order's own);
// and the reclaim, which ends a rental early (destructive, idempotent: a repeat queues nothing).
var (
	readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(true)}
	adds     = &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(true)}
	returns  = &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(true)}
)

func ptr[T any](v T) *T { return &v }

// addCall registers a tool whose input In maps to one API call and whose output is the API's
// answer, checked against the OpenAPI schema named answer.
func addCall[In any](name, title, desc, answer string, ann *mcp.ToolAnnotations, build func(In) (apiCall, error)) func(*mcp.Server, *client.Client, apiSchemas) error {
	return func(s *mcp.Server, c *client.Client, schemas apiSchemas) error {
		outSchema, err := schemas.output(answer)
		if err != nil {
			return err
		}
		inSchema, err := inputSchema[In]()
		if err != nil {
			return err
		}
		a := *ann
		a.Title = title
		var addErr error
		func() {
			defer func() {
				if r := recover(); r != nil { // the SDK panics on a schema it cannot use
					addErr = fmt.Errorf("%v", r)
				}
			}()
			mcp.AddTool(s, &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: &a, InputSchema: inSchema, OutputSchema: outSchema},
				func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
					call, err := build(in)
					if err != nil {
						return nil, nil, err
					}
					var body []byte
					if call.body != nil {
						if body, err = json.Marshal(call.body); err != nil {
							return nil, nil, err
						}
					}
					resp, err := c.Do(ctx, call.method, call.target, body, call.opts...)
					if err != nil {
						return nil, nil, toolError(err)
					}
					var out map[string]any
					if err := json.Unmarshal(resp.Body, &out); err != nil {
						return nil, nil, fmt.Errorf("the API's answer (HTTP %d, request %s) is not a JSON object: %w", resp.Status, resp.RequestID(), err)
					}
					if call.pick != nil {
						if out, err = call.pick(out); err != nil {
							return nil, nil, err
						}
					}
					return nil, out, nil
				})
		}()
		return addErr
	}
}

// toolError turns a failed call into the tool error an agent reads: the API's envelope as
// JSON when the API answered, the cause otherwise.
func toolError(err error) error {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("the API could not be reached or gave no usable answer (the call was retried as the spec's policy allows): %v", err)
	}
	field := any(nil)
	if ae.Field != "" {
		field = ae.Field
	}
	env := map[string]any{"error": map[string]any{
		"code": ae.Code, "slug": ae.Slug, "message": ae.Message, "field": field,
		"retryable": ae.Retryable, "details": ae.Details,
	}, "request_id": ae.RequestID, "http_status": ae.Status}
	var gave *client.GiveUpError
	if errors.As(err, &gave) {
		env["attempts"] = gave.Attempts
	}
	b, _ := json.Marshal(env)
	return errors.New(string(b))
}

// Inputs. Field descriptions are the jsonschema tags (the SDK derives the input schemas);
// enumerations and bounds are checked by the API, whose refusals come back as tool errors.

type pricesIn struct {
	Resource string `json:"resource,omitempty" jsonschema:"only rows of this resource: energy, bandwidth or activation (all when empty)"`
}

type emptyIn struct{}

type estimateIn struct {
	Resource string `json:"resource" jsonschema:"energy or bandwidth"`
	Amount   int64  `json:"amount" jsonschema:"units to rent (energy or bandwidth points)"`
	Tier     string `json:"tier" jsonschema:"rental period: 5m or 1h (the tiers on sale; see get_prices)"`
	Receiver string `json:"receiver,omitempty" jsonschema:"the address to receive it (Base58Check, T...); adds the activation fee when it was never activated"`
}

type quoteIn struct {
	Resource string `json:"resource" jsonschema:"energy, bandwidth or activation"`
	Tier     string `json:"tier" jsonschema:"rental period: 5m or 1h"`
	Amount   int64  `json:"amount,omitempty" jsonschema:"units to rent (required for energy and bandwidth)"`
	Receiver string `json:"receiver,omitempty" jsonschema:"the receiving address; prices the activation fee when needed"`
}

type transferIn struct {
	FromAddress     string `json:"from_address" jsonschema:"the sender of the token transfer (it pays the energy)"`
	ToAddress       string `json:"to_address" jsonschema:"the recipient of the transfer (a first-time holder costs about twice the energy)"`
	ContractAddress string `json:"contract_address,omitempty" jsonschema:"the TRC-20 contract (default: the network's USDT)"`
	Amount          string `json:"amount,omitempty" jsonschema:"token amount in its smallest unit, as a decimal string"`
	Tier            string `json:"tier,omitempty" jsonschema:"rental period for the price (default 1h)"`
}

type addressIn struct {
	Address string `json:"address" jsonschema:"a TRON address (Base58Check, T...)"`
}

type orderIn struct {
	ClientOrderID string `json:"client_order_id" jsonschema:"your unique id for this order (1 to 128 printable ASCII characters, no spaces); repeating the call with the same id returns the first order and never charges twice"`
	Resource      string `json:"resource,omitempty" jsonschema:"energy, bandwidth or activation (omit with quote_id)"`
	Amount        int64  `json:"amount,omitempty" jsonschema:"units to rent (omit with quote_id)"`
	Tier          string `json:"tier,omitempty" jsonschema:"rental period: 5m or 1h (omit with quote_id)"`
	Receiver      string `json:"receiver" jsonschema:"the address that receives the resource"`
	Activate      bool   `json:"activate,omitempty" jsonschema:"activate a never-activated receiver first, adding the activation fee (free when it is activated)"`
	QuoteID       string `json:"quote_id,omitempty" jsonschema:"the id of a quote_order result, to order at its price before it expires"`
	MaxPriceSun   int64  `json:"max_price_sun" jsonschema:"the most the user agreed to pay for the whole order in SUN, activation included: the total_amount_sun of estimate_order or quote_order as shown to the user. A live total above it is refused (3006) and nothing is charged"`
}

type orderIDIn struct {
	ID            string `json:"id,omitempty" jsonschema:"the order id (ord_...)"`
	ClientOrderID string `json:"client_order_id,omitempty" jsonschema:"or your client_order_id of the order"`
}

type listIn struct {
	Status   string `json:"status,omitempty" jsonschema:"only orders in these statuses, comma-separated (created, paid, allocating, delegated, active, expired, reclaimed, failed, refunded)"`
	Receiver string `json:"receiver,omitempty" jsonschema:"only orders for this receiver"`
	Limit    int    `json:"limit,omitempty" jsonschema:"page size (default 50)"`
	Cursor   string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page, unchanged"`
}

type reclaimIn struct {
	ID string `json:"id" jsonschema:"the order id (ord_...) to return early"`
}

// newKey is a fresh Idempotency-Key for one tool call: the client's retries of that call
// repeat it, so a retried write takes effect once.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

func query(target string, v url.Values) string {
	if q := v.Encode(); q != "" {
		return target + "?" + q
	}
	return target
}

var tools = []tool{
	{"get_prices", "", addCall("get_prices", "Price table",
		"The live price table (GET /v1/prices): per resource and tier, price_sun_per_unit (rounded up to whole SUN), min and max amounts, volume tiers, whether it is on sale (available), the day-part schedule and the activation price.",
		"PriceTable", readOnly, func(in pricesIn) (apiCall, error) {
			v := url.Values{}
			if in.Resource != "" {
				v.Set("resource", in.Resource)
			}
			return apiCall{method: http.MethodGet, target: query("/v1/prices", v)}, nil
		})},
	{"get_market", "", addCall("get_market", "Market board",
		"The market board (GET /v1/market): this service's and other providers' energy prices side by side, with the chain's burn price for comparison.",
		"MarketBoard", readOnly, func(emptyIn) (apiCall, error) {
			return apiCall{method: http.MethodGet, target: "/v1/market"}, nil
		})},
	{"estimate_order", "", addCall("estimate_order", "Estimate an order",
		"What an order would cost now (GET /v1/estimate, non-binding): price_sun_per_unit, energy_amount_sun, activate_amount_sun (the activation fee when the receiver was never activated), total_amount_sun and receiver_activated. Show total_amount_sun to the user before place_order.",
		"Estimate", readOnly, func(in estimateIn) (apiCall, error) {
			v := url.Values{"resource": {in.Resource}, "amount": {strconv.FormatInt(in.Amount, 10)}, "tier": {in.Tier}}
			if in.Receiver != "" {
				v.Set("receiver", in.Receiver)
			}
			return apiCall{method: http.MethodGet, target: query("/v1/estimate", v)}, nil
		})},
	{"quote_order", scopes.QuotesWrite, addCall("quote_order", "Quote an order",
		"A binding price for 120 seconds (POST /v1/quotes): id, total_amount_sun and expires_at. Pass the id as quote_id and the total as max_price_sun to place_order to order at that price.",
		"Quote", adds, func(in quoteIn) (apiCall, error) {
			body := map[string]any{"resource": in.Resource, "tier": in.Tier}
			if in.Amount != 0 {
				body["amount"] = in.Amount
			}
			if in.Receiver != "" {
				body["receiver"] = in.Receiver
			}
			return apiCall{method: http.MethodPost, target: "/v1/quotes", body: body,
				opts: []client.CallOption{client.Header("Idempotency-Key", newKey()), client.Idempotent()}}, nil
		})},
	{"estimate_transfer", scopes.EstimatesRead, addCall("estimate_transfer", "Estimate a token transfer's energy",
		"The energy and bandwidth a TRC-20 transfer needs (POST /v1/estimate/transfer), recommended_amount to rent, its price, and burn_alternative_sun (what burning TRX would cost instead).",
		"TransferEstimate", readOnly, func(in transferIn) (apiCall, error) {
			body := map[string]any{"from_address": in.FromAddress, "to_address": in.ToAddress}
			if in.ContractAddress != "" {
				body["contract_address"] = in.ContractAddress
			}
			if in.Amount != "" {
				body["amount"] = in.Amount
			}
			if in.Tier != "" {
				body["tier"] = in.Tier
			}
			return apiCall{method: http.MethodPost, target: "/v1/estimate/transfer", body: body,
				opts: []client.CallOption{client.Idempotent()}}, nil // computes, changes nothing
		})},
	{"get_resources", "", addCall("get_resources", "An address's resources",
		"An address's energy and bandwidth on chain (GET /v1/resources/{address}): limits, used and available, whether it is activated, and this account's live orders for it.",
		"AddressResources", readOnly, func(in addressIn) (apiCall, error) {
			return apiCall{method: http.MethodGet, target: "/v1/resources/" + url.PathEscape(in.Address)}, nil
		})},
	{"get_balance", scopes.AccountRead, addCall("get_balance", "Account balance",
		"The account's balance in SUN (GET /v1/balance): balance_sun, reserved_sun (held by orders in flight) and available_sun (what orders can spend).",
		"Balance", readOnly, func(emptyIn) (apiCall, error) {
			return apiCall{method: http.MethodGet, target: "/v1/balance"}, nil
		})},
	{"place_order", scopes.OrdersWrite, addPlaceOrder},
	{"get_order", scopes.OrdersRead, addCall("get_order", "Read an order",
		"One order by id or by client_order_id (GET /v1/orders/{id}): status (created, paid, allocating, delegated, then active until expires_at; failed with the charge refunded), amounts, receiver and delegation hashes.",
		"Order", readOnly, func(in orderIDIn) (apiCall, error) {
			switch {
			case in.ID != "" && in.ClientOrderID != "":
				return apiCall{}, errors.New("give id or client_order_id, not both")
			case in.ID != "":
				return apiCall{method: http.MethodGet, target: "/v1/orders/" + url.PathEscape(in.ID)}, nil
			case in.ClientOrderID != "":
				v := url.Values{"client_order_id": {in.ClientOrderID}, "limit": {"1"}}
				return apiCall{method: http.MethodGet, target: query("/v1/orders", v), pick: firstOrder(in.ClientOrderID)}, nil
			}
			return apiCall{}, errors.New("give id or client_order_id")
		})},
	{"list_orders", scopes.OrdersRead, addCall("list_orders", "List orders",
		"The account's orders, newest first (GET /v1/orders), one page: data and next_cursor (null on the last page; pass it back as cursor for the next).",
		"OrderList", readOnly, func(in listIn) (apiCall, error) {
			v := url.Values{}
			if in.Status != "" {
				v.Set("status", in.Status)
			}
			if in.Receiver != "" {
				v.Set("receiver", in.Receiver)
			}
			if in.Limit != 0 {
				v.Set("limit", strconv.Itoa(in.Limit))
			}
			if in.Cursor != "" {
				v.Set("cursor", in.Cursor)
			}
			return apiCall{method: http.MethodGet, target: query("/v1/orders", v)}, nil
		})},
	{"reclaim_order", scopes.OrdersWrite, addCall("reclaim_order", "Reclaim an order early",
		"Ends an active order early and takes the delegation back (POST /v1/orders/{id}/reclaim, 202): the order becomes reclaimed once the undelegation lands. The unused time is not refunded. A repeat answers 202 again and queues nothing more; an order filled by a third-party provider cannot be reclaimed (3008).",
		"Order", returns, func(in reclaimIn) (apiCall, error) {
			return apiCall{method: http.MethodPost, target: "/v1/orders/" + url.PathEscape(in.ID) + "/reclaim",
				opts: []client.CallOption{client.Header("Idempotency-Key", newKey()), client.Idempotent()}}, nil
		})},
}

// firstOrder picks the one order of a look-up by client_order_id; none found is the same
// tool error as an unknown id (3001), so an agent handles both alike.
func firstOrder(cid string) func(map[string]any) (map[string]any, error) {
	return func(page map[string]any) (map[string]any, error) {
		data, _ := page["data"].([]any)
		if len(data) == 0 {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": apierr.OrderNotFound.Code, "slug": apierr.OrderNotFound.Slug,
				"message": "no order of this account has client_order_id " + strconv.Quote(cid), "field": "client_order_id", "retryable": false}})
			return nil, errors.New(string(b))
		}
		o, ok := data[0].(map[string]any)
		if !ok {
			return nil, errors.New("the API's order list holds a non-object")
		}
		return o, nil
	}
}

// addPlaceOrder registers place_order: POST /v1/orders through client.CreateOrder (the
// spec's retry policy with the same client_order_id, then a look-up by it when the outcome
// is unknown), with the price stated before anything is spent: max_price_sun is required,
// so the API refuses (3006, nothing charged) an order whose live total is above what the
// user agreed to.
func addPlaceOrder(s *mcp.Server, c *client.Client, schemas apiSchemas) error {
	outSchema, err := schemas.output("Order")
	if err != nil {
		return err
	}
	inSchema, err := inputSchema[orderIn]()
	if err != nil {
		return err
	}
	mcp.AddTool(s, &mcp.Tool{Name: "place_order", InputSchema: inSchema, Title: "Place an order (spends the balance)",
		Description: "Rents energy or bandwidth to a receiver, or activates an address, paid from the account's balance (POST /v1/orders). " +
			"First call estimate_order or quote_order, tell the user total_amount_sun and pass the total they agreed to as max_price_sun: " +
			"a higher live total is refused (3006) and nothing is charged. The result is the order (status created; it becomes active within " +
			"a few blocks, see get_order). 4001 means the balance is short (nothing charged); 3004 means the receiver needs activate: true.",
		Annotations:  &mcp.ToolAnnotations{Title: "Place an order", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(true)},
		OutputSchema: outSchema},
		func(ctx context.Context, _ *mcp.CallToolRequest, in orderIn) (*mcp.CallToolResult, any, error) {
			if in.MaxPriceSun <= 0 {
				return nil, nil, errors.New("max_price_sun must be the total the user agreed to, in SUN (from estimate_order or quote_order): nothing was ordered")
			}
			req := client.OrderRequest{ClientOrderID: in.ClientOrderID, Resource: in.Resource, Amount: in.Amount, Tier: in.Tier,
				Receiver: in.Receiver, QuoteID: in.QuoteID, MaxPriceSun: &in.MaxPriceSun}
			if in.Activate {
				req.Activate = ptr(true)
			}
			created, err := c.CreateOrder(ctx, req)
			if err != nil {
				return nil, nil, toolError(err)
			}
			b, err := json.Marshal(created.Order)
			if err != nil {
				return nil, nil, err
			}
			var out map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				return nil, nil, err
			}
			what := "created"
			if created.Replayed {
				what = "already existed with this client_order_id (nothing more charged)"
			}
			summary := fmt.Sprintf("Order %s %s: total_amount_sun %d (max_price_sun %d), status %s.",
				created.Order.ID, what, created.Order.TotalAmountSun, in.MaxPriceSun, created.Order.Status)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(b)}}}, out, nil
		})
	return nil
}
