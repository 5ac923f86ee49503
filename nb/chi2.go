package nb

import "math"

// chi2Tails returns log Q and log P, the logs of the upper and lower tail
// probabilities of a χ² variable with 2n degrees of freedom at 2m:
//
//	Q = e^−m Σ_{i<n} m^i/i!,  P = 1 − Q = e^−m Σ_{i≥n} m^i/i!
//
// (the Poisson form of the regularized incomplete gamma function, exact for
// even degrees of freedom). Fisher's method needs both tails to far below
// 1e-308, where the probabilities themselves underflow and would tie the
// scores of every clear spam: so each is computed in log space, the smaller
// tail as a series started at its largest term, and the other as log1p of
// minus the first. It needs n ≥ 1 and m ≥ 0.
func chi2Tails(m float64, n int) (logQ, logP float64) {
	if m <= 0 {
		return 0, math.Inf(-1)
	}
	lm := math.Log(m)
	logTerm := func(i int) float64 {
		lg, _ := math.Lgamma(float64(i) + 1)
		return float64(i)*lm - lg - m
	}
	// The Poisson terms m^i/i! rise while i < m and fall after, so the
	// tail that does not hold the mode starts at its largest term and the
	// series falls from there; 1e-17 of the sum is below float64's
	// resolution.
	sum, t := 1.0, 1.0
	if m < float64(n) {
		for i := n + 1; t > 1e-17*sum; i++ {
			t *= m / float64(i)
			sum += t
		}
		logP = logTerm(n) + math.Log(sum)
		return log1mexp(logP), logP
	}
	for i := n - 1; i > 0 && t > 1e-17*sum; i-- {
		t *= float64(i) / m
		sum += t
	}
	logQ = logTerm(n-1) + math.Log(sum)
	return logQ, log1mexp(logQ)
}

// log1mexp returns log(1 − e^x) for x ≤ 0, accurately near both ends
// (Mächler, 2012).
func log1mexp(x float64) float64 {
	if x >= 0 {
		return math.Inf(-1)
	}
	if x > -math.Ln2 {
		return math.Log(-math.Expm1(x))
	}
	return math.Log1p(-math.Exp(x))
}

// logAddExp returns log(e^a + e^b) without overflow or underflow.
func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}
