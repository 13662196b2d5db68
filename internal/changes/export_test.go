package changes

// Encode is encode, for the tests of the summary's bound.
var Encode = encode
