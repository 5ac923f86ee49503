// Package nb scores messages with a multinomial naive Bayes classifier over
// two or more named classes, and turns the scores into decisions. It is pure
// arithmetic on counts the caller supplies: it reads no storage, logs
// nothing and keeps no state between calls.
//
// # Method
//
// A message is a bag of features (tokens), each with its count in the
// message. For each class c,
//
//	score(c) = log P(c) + Σ_w count_w · log p(w|c)
//	p(w|c)   = (n_cw + α) / (n_c + α·V)
//
// where n_cw counts w in the messages trained as c, n_c counts all tokens in
// them, V is the vocabulary size and α > 0 the additive smoothing (1 is
// Laplace, other values Lidstone); without smoothing, one word never seen in
// a class would rule that class out. The prior P(c) is the maximum
// likelihood N_c/N, the MAP estimate (N_c+a)/(N+K·a) under a symmetric
// Dirichlet prior, or uniform. Scores stay in log space, since a product of
// a few hundred small probabilities underflows, and the posterior P(c|x) is
// their softmax, computed with log-sum-exp.
//
// A feature with zero counts in every class is left out, as missing data
// is: the model knows nothing about it, and any constant it contributed
// would be the same for every class.
//
// # Per-user models
//
// A user's model is estimated with the global model as its prior, each
// global probability acting as λ pseudo-counts:
//
//	p_u(w|c) = (n_u,cw + λ·p_g(w|c)) / (n_u,c + λ)
//	P_u(c)   = (N_u,c + λ'·P_g(c)) / (N_u + λ')
//
// A user with little training is scored mostly by the global model, one
// with much mostly by its own counts, and one with none exactly by the
// global model, which is then the only one computed. Uniform priors stay
// uniform.
//
// # Options
//
// Params holds the levers the spam-filtering literature uses, all off by
// default so that they can be chosen by cross-validation: length
// normalization, scoring by the TopN most telling tokens only, complement
// naive Bayes (Rennie et al., 2003) and a minimum training count per token.
// Features may belong to two parts of a message (Feature.Part, a mail's
// header and body); length normalization then divides each part's
// log-likelihood by its own n^β, so that the parts weigh as two witnesses
// whatever their lengths.
//
// # Measures
//
// A message also has measures, continuous features such as its size or
// its number of links (package tokenize defines them). Naive Bayes takes
// them as more factors of the same product: each measure x adds
//
//	Weight · log p(x|c)
//
// to class c's score, and a measure a message lacks adds nothing, as
// missing data. The densities p(x|c) are estimated from a binned sample
// of the class's training values (Sample: values on a fixed grid of
// levels, so that a store keeps integer statistics that untraining takes
// back exactly), either as a Gaussian fitted by maximum likelihood from
// the sample's count, sum and sum of squares (its variance at least one
// level squared), or as a Parzen window: a Gaussian kernel of width h on
// every value, reflected at the grid's ends. The width is chosen by the
// leave-one-out log-likelihood of the training values (ChooseBandwidth):
// their own likelihood only grows as h shrinks, since each value then
// sits on its own kernel, while the likelihood of each value under the
// density of the others peaks where h fits the data. Either density is
// smoothed toward the uniform one with a few pseudo-values
// (Params.MeasureAlpha), as token counts are with α, and a user's takes
// the global one as its prior, worth Params.MeasureLambda values.
//
// A few measures beside hundreds of tokens would, at weight 1, either be
// drowned by them or, where a density is sharp, drown them: Value.Weight
// scales each, and the caller chooses the weights per family of measures
// on held-out data. Params.MeasureClip bounds the log ratio one measure
// may add between two classes, since a value far from a class's sample,
// where a density's estimate is least sure, is where its ratio is
// largest.
//
// # Decisions
//
// A Decider picks the class of least expected loss Σ_k ℓ(i|k)·P(k|x) for a
// loss matrix (the 0-1 loss picks the most probable class), and reports
// Unsure when the joint log-odds of the positive classes (spam, or spam
// and phishing) against all others, Result.GroupLogOdds, fall inside a
// band. For two classes this is the rule of deciding c1 when
//
//	p(x|c1)/p(x|c2) > [(ℓ12 − ℓ22)/(ℓ21 − ℓ11)] · P(c2)/P(c1)
//
// whose threshold on the posterior Loss.Threshold reports.
//
// # Discriminative weights
//
// Naive Bayes estimates each token's evidence from its own counts, so it
// cannot learn that one token should outweigh hundreds: that every
// message relayed by one mailing list is wanted whatever its body says,
// or that a newsletter is wanted at one of a person's addresses and not
// at the others. With Params.Discriminative each feature also carries a
// learned weight per class, and
//
//	score(c) = log P(c) + Mix · Σ_p LL_p(c)/n_p^β + Σ_p Σ_{w∈p} count_w · θ_wc / ‖x_p‖
//
// where LL_p(c) is part p's log-likelihood under the counts and ‖x_p‖ the
// Euclidean length of the part's count vector. This is a logistic
// regression on the message's features whose offset is naive Bayes's
// score, as in Sculley and Wachman's online logistic regression, which
// led the TREC 2007 spam track, or Wang and Manning's NBSVM, which feeds
// naive Bayes's ratios to a discriminative learner. Result.Step gives the
// online update after a message's true class is known, a gradient step on
// −log P(class|x). The weights start at zero, where the score is naive
// Bayes's scaled by Mix, and learn only what the counts get wrong; a
// user's weights add to the global model's, as the user's counts use the
// global ones as their prior. Trained on the log-loss, the posterior is
// close to a calibrated probability.
//
// # Limits
//
// Naive Bayes assumes tokens independent given the class. They are not, so
// correlated tokens are counted several times and, without the
// discriminative weights, posteriors of all but short messages sit at 0 or
// 1: they rank messages well but are not calibrated probabilities, and
// thresholds on them must be chosen on held-out data. For the same reason a spammer can pad a message with
// innocent words, each adding its own evidence. TopN caps how many tokens
// count and length normalization how much the length of a message does, but
// neither makes padding harmless: it has to be measured.
// Complement naive Bayes changes nothing for two classes: the complement of
// one class is the other, and the log-odds are those of the plain model.
//
// Counts are float64: integers are exact up to 2^53. Score never returns NaN
// or an infinity: counts that are negative or NaN count as zero, and counts
// and settings are clamped to ranges (counts up to 1e100, smoothing
// parameters in [1e-9, 1e9]) within which no sum can overflow.
//
// Methods never modify a Model, so one Model can score messages on many
// goroutines at once.
package nb
