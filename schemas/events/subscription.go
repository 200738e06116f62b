package events

// SubscriptionRefilled is the data of subscription.refilled (subscriptionrefilled.schema.json):
// an auto-refill placed an order. TriggerAvailable is the free resource seen on the address
// when the refill fired (Semantics 8); RefillsToday counts this refill.
type SubscriptionRefilled struct {
	SubscriptionID   string `json:"subscription_id"`
	OrderID          string `json:"order_id"`
	Receiver         string `json:"receiver"`
	Resource         string `json:"resource"`
	Amount           int64  `json:"amount"`
	Tier             string `json:"tier"`
	TriggerAvailable int64  `json:"trigger_available"`
	ThresholdAmount  int64  `json:"threshold_amount"`
	TotalAmountSun   int64  `json:"total_amount_sun"`
	RefillsToday     int    `json:"refills_today"`
}

// SubscriptionSuspended is the data of subscription.suspended
// (subscriptionsuspended.schema.json). Reason is insufficient_funds (both amounts set),
// price_above_limit (required_sun is the refill's total, available_sun null) or
// daily_limit_reached (both null).
type SubscriptionSuspended struct {
	SubscriptionID string `json:"subscription_id"`
	Receiver       string `json:"receiver"`
	Reason         string `json:"reason"`
	RequiredSun    *int64 `json:"required_sun"`
	AvailableSun   *int64 `json:"available_sun"`
}

// SubscriptionPaused is the data of subscription.paused (subscriptionpaused.schema.json).
// Reason is billing_failed, reserve_exhausted or user.
type SubscriptionPaused struct {
	SubscriptionID string `json:"subscription_id"`
	Receiver       string `json:"receiver"`
	Reason         string `json:"reason"`
}

// SubscriptionCharged is the data of subscription.charged (subscriptioncharged.schema.json):
// a plan subscription's daily fee was charged. Plan is the preset slug or "custom".
type SubscriptionCharged struct {
	SubscriptionID string `json:"subscription_id"`
	Receiver       string `json:"receiver"`
	Plan           string `json:"plan"`
	AmountSun      int64  `json:"amount_sun"`
	NextBillingAt  Time   `json:"next_billing_at"`
}
